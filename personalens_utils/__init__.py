"""PersonaLens research kit: one small package shared by every notebook."""

__version__ = "0.1.0"
