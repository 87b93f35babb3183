"""The HTTP surface: thin Flask adapters over `Gateway` (gateway.service). app.py (the API, with its
description openapi.json), openai_api.py (OpenAI's chat completions over the federation),
admin_page.py, admin_auth.py and admin_state.py (the read-only admin page and its key; its HTML in
templates/) and serving.py (`hansa gateway serve` under the production server).

The top room: it may import every other, and none imports it.
"""
