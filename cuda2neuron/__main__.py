import sys

from cuda2neuron.cli import main

sys.exit(main())
