"""Run the service like uvicorn does, from the environment, but with the test ledger fake.

Used by the restart test: ``python -m tests.challenge.serve_fake_ledger PORT``.
"""

from __future__ import annotations

import sys

import uvicorn

from hypertrain.challenge.app import create_app
from hypertrain.challenge.settings import settings_from_env
from tests.challenge.helpers import FakeLedger

if __name__ == "__main__":
    app = create_app(settings_from_env(), ledger=FakeLedger())
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
