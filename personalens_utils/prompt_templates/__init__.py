"""Every prompt template of the kit, one module a stage; each a plain string with named fields."""
