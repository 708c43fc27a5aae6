"""LeRobot interop without lerobot: our demonstrations written as a LeRobotDataset v3.0
folder (export), such a folder read back into arrays (reader), lerobot's statistics (stats),
the format's paths and names (layout), and our task with lerobot's observation keys (env).

pyarrow and pandas come with the optional extra: `pip install -e .[lerobot]`."""
