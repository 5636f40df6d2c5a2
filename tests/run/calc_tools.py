def calculate(input):
    if input["operation"] == "add":
        return {"result": input["a"] + input["b"]}
    return {"result": input["a"] * input["b"]}


async def text_stats(input, signal=None, needs=None):
    return {"characters": len(input["text"]), "words": len(input["text"].split())}
