"""The statements of the ``jobs`` table, one module per purpose: enqueue, claim, outcomes
(of a worker's runs), keys (jobs by key), actions (an operator's), dashboard, metrics,
retention, testing (``pgbeat.testing``'s) and meta."""
