"""LeRobot interop without lerobot: our demonstrations written as a LeRobotDataset v3.0
folder (export, data_files, stats), such a folder read back into arrays (reader) and trained
on (datamodule), the format's paths and names (layout), and our task with lerobot's
observation keys (env; plugin registers it with lerobot when lerobot is installed).

pyarrow and pandas come with the optional extra: `pip install -e .[lerobot]`."""
