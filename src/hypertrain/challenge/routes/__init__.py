"""One router per resource, mirroring the service's packages: rounds, admission,
disputes, competition, dashboard, platform. Each module's ``router`` carries its
resource's tag and joins its audiences' routers (public, miner-signed, worker token,
admin token), so a route's path and auth read as before."""
