"""Templates for ``kernelpilot new-dsl``: a pip-installable third-party plugin package."""
