"""``kueri serve``: ask a comparative question in a browser (or through a JSON API), see each side's arguments.

:mod:`kueri.serve.engine` answers questions with the pipeline ``kueri run`` uses, as :mod:`kueri.serve.answer`'s
records, on the pipeline thread of :mod:`kueri.serve.queue`; :mod:`kueri.serve.app` is the Starlette application
(page and API, with :mod:`kueri.serve.pyserini`'s routes); :mod:`kueri.serve.server` starts it on uvicorn. Needs
the ``serve`` extra (starlette, uvicorn, jinja2).
"""
