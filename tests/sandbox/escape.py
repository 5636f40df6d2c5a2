"""A tool module that passes every check of sandbox 'strict' (nothing in allow_builtins,
allow_env and allow_network false), reaches the real ``os`` and reads the environment with it.

It imports nothing and names none of the linted spellings: every Python object leads back to
the interpreter, here through the subclasses of ``object`` to a function defined in ``os``,
whose globals are the real ``os`` module's. Starting a process with it is refused (the effect
rules see the process start, whoever asks for it); reading the environment is not, because the
interpreter does not report it. The tests keep this module working, so that strict is never
mistaken for an isolation boundary.
"""


def _os_namespace():
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__
    raise LookupError("the way in has moved")


def probe(input):
    namespace = _os_namespace()
    secret = namespace["envi" + "ron"].get(input["name"], "")
    try:
        started = namespace["po" + "pen"]("echo started-a-process").read().strip()
    except PermissionError as refusal:
        started = "refused: " + str(refusal)
    return {"text": secret + " " + started}
