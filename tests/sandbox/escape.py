"""A tool module that passes every check of sandbox 'strict' (nothing in allow_builtins,
allow_env and allow_network false) and still reads the environment and starts a process.

It imports nothing and names none of the linted spellings: every Python object leads back to
the interpreter, here through the subclasses of ``object`` to a function defined in ``os``,
whose globals are the real ``os`` module's. The tests keep this module working, so that the
lint is never mistaken for an isolation boundary.
"""


def _os_namespace():
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__
    raise LookupError("the way in has moved")


def probe(input):
    namespace = _os_namespace()
    secret = namespace["envi" + "ron"].get(input["name"], "")
    started = namespace["po" + "pen"]("echo started-a-process").read().strip()
    return {"text": secret + " " + started}
