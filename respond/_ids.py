import secrets

__all__ = ["new_id"]


def new_id(prefix: str) -> str:
    """An opaque id in OpenAI's style: `resp_`, `msg_`, `fc_`, `rs_`, `call_`, `conv_`..."""
    return f"{prefix}_{secrets.token_hex(24)}"
