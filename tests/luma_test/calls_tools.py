"""The handler of calls.luma: it reports the limit it received and changes its input, so that
a test can see that calls("lookup") holds the input as it was given."""


def lookup(input):
    seen = dict(input)
    input["id"] = "changed by the handler"
    input["extra"] = True
    if seen["limit"] < 1:
        raise ValueError("the limit must be positive")
    return {"id": seen["id"], "team": f"limit {seen['limit']}"}
