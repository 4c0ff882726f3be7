"""The playground page: static HTML, CSS and ES modules, served by respond/api/web.py."""
