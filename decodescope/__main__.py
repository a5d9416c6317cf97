from decodescope.cli.main import main

main()
