"""`vgpu scheduler`: the admission webhook and kube-scheduler extender (filter, prioritize, bind).

Modules, one idea each: `config` (settings), `state` (ledger, quota and reservations under one
lock), `follower` (cluster events into the state), `service` (the use cases), `http_bodies`
(HTTP body models), `http` (the routes: FastAPI apps, and the bare router `routes` for the
extender verbs), `explanations` (the pods last filtered, for `GET /explain`), `metrics`
(Prometheus), `runtime` (start, sync, sweep, stop), `container` (wiring) and `cli`. The
`--fake-cluster` file, which every process reads, is `vgpu.app.fake_mode`.
"""
