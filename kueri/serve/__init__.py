"""``kueri serve``: ask a comparative question in a browser (or through a JSON API), see each side's arguments.

:mod:`kueri.serve.engine` answers questions with the pipeline ``kueri run`` uses; :mod:`kueri.serve.app` is
the Starlette application (page and API); :mod:`kueri.serve.server` starts it on uvicorn. Needs the
``serve`` extra (starlette, uvicorn, jinja2).
"""
