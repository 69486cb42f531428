"""Sessions and turns: the lifecycle of one agent process and its prompts."""
