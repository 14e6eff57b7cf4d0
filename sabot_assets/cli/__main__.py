from sabot_assets.cli import main

main()
