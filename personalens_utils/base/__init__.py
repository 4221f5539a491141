"""The floor under everything: the kit's error base (`errors`) and where things are (`paths`). Imports
nothing else of the package."""
