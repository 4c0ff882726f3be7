from respond.cli import main

main()
