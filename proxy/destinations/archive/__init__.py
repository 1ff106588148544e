"""The local archive destination: JSON Lines files per day, fsynced before the 2xx."""
