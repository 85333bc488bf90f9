import sys

from studyrun.cli import main

sys.exit(main())
