"""Calibration: a node model fitted from the node's own measurements (``calibrate``), the calibration data
every run adds to (``store``), and what ``cosched calibrate`` does with them (``workflow``). See docs/node-model.md."""
