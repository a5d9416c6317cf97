from decodescope.cli import run

run()
