"""The `decodescope` command line: main.py, one module per command."""

import gc


def run():
    """The `decodescope` console script (and `python -m decodescope`): main.main with the cyclic
    garbage collector set for a process that mostly starts up: `decodescope model` ends with
    ~15,000 container objects (modules, classes, functions), nearly all made at start-up and alive
    until exit. Looking for cycles among them every 700 allocations (Python's default) and again
    over all of them at exit was 7 % of its instructions (423 -> 393 million)."""
    gc.set_threshold(50_000)  # a young collection every 50,000 net allocations: at most a few MB of cycles wait
    from decodescope.cli.codecache import install
    codes = install()
    from decodescope.cli.main import main
    try:
        main()
    finally:
        codes.save()
        gc.freeze()  # the exit's full collections skip what lived until now (memory goes back to the OS anyway)
