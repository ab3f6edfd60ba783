"""The rules lab: programmes as files, simulation, replay and forecasting for notebooks and the command line."""
