"""Calibration: a node model fitted from the node's own measurements (``calibrate``), and the calibration data
every run adds to (``store``). See docs/node-model.md."""
