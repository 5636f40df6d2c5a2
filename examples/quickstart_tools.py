"""Handlers for examples/quickstart.luma: the contracts live in the .luma file, the code here."""


def calculate(input):
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    if input["operation"] == "multiply":
        return {"result": input["a"] * input["b"]}
    raise ValueError(f"Unsupported operation: {input['operation']}")


async def text_stats(input):
    text = input["text"]
    return {"characters": len(text), "words": len(text.split())}
