import luma

program = luma.load("examples/quickstart.luma", tool_modules=["examples/quickstart_tools.py"])
answer = program.run_sync("Flow", text="Luma keeps tool contracts typed")
print(answer["sum"], answer["words"])
