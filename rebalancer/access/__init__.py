"""Cluster access, below the snapshot and the executor: the ``Backend`` contract (``backend``: what a cluster is
asked and told, and the lock's ``Marker``), the registry that opens one for a source URL (``connect``:
``open_backend``), and the two backends: ZooKeeper (``zk_backend``, zk://) and the Admin API (``admin_backend``,
kafka://). Taking a snapshot reads a cluster through it; executing a plan changes one through it."""
