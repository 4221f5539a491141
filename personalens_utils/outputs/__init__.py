"""What a result looks like outside the run store: frames helpers, HTML for notebooks (`display`),
tables and their LaTeX (`tables`, `latex`, `latex_width`) and figures (`plots`). Imports only `base`."""
