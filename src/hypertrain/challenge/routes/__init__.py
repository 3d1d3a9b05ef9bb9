"""One router per resource: platform contract, public views, miners, workers, admin."""
