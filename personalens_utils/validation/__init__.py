"""Notebook 02: checks that a benchmark is sound: profile consistency, Tables 1 and 6-10, Figure 3."""
