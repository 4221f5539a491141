"""Notebook 02: checks that a benchmark is sound: profile consistency, Tables 1 and 6-10, Figure 3.

`metrics`, `lexical` and `consistency` compute the measures; `tables` turns them into the tables
notebook 02 shows (each a `personalens_utils.outputs.tables.TableResult`); `figures` draws Figure 3.
"""
