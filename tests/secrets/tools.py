import os


def db_write(input, signal=None, needs=None):
    db = needs["db"]
    if input["table"] == "fail":
        # a careless handler that puts secrets into its error message
        raise RuntimeError(f"cannot connect as {db['user']} with {db['password']} / "
                           f"{os.environ['SECRET_DB_PASSWORD']}")
    return {"ok": True, "user": "writer"}
