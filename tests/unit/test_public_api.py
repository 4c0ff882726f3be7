import respond


def test_public_names_are_pinned() -> None:
    assert sorted(respond.__all__) == [
        "ChatMessage",
        "ChatTurn",
        "Delta",
        "Engine",
        "EngineError",
        "Finish",
        "ReasoningDelta",
        "TextDelta",
        "ToolCallArgumentsDelta",
        "ToolCallEnd",
        "ToolCallStart",
        "Usage",
        "__version__",
        "create_app",
    ]
    for name in respond.__all__:
        assert hasattr(respond, name)
