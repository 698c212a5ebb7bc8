from pinchpoint.cli import main

main()
