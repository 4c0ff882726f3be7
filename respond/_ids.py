import secrets

__all__ = ["PREFIXES", "new_id"]

# The prefix of every id a route looks up, by kind: an id without its kind's prefix was never
# minted here (nor by OpenAI), so it is a malformed request, not a missing object.
PREFIXES = {
    "response": "resp",
    "conversation": "conv",
    "file": "file",
    "vector_store": "vs",
    "file_batch": "vsfb",
    "container": "cntr",
    "container_file": "cfile",
}


def new_id(prefix: str) -> str:
    """An opaque id in OpenAI's style: `resp_`, `msg_`, `fc_`, `rs_`, `call_`, `conv_`..."""
    return f"{prefix}_{secrets.token_hex(24)}"
