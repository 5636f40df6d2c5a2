"""Handlers for examples/cookbook/text_stats.luma."""


def calculate(input):
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


async def text_stats(input):
    text = input["text"]
    return {"characters": len(text), "words": len(text.split())}
