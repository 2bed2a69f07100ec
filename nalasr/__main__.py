from nalasr.cli import main

main()
