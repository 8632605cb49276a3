"""The test database's connection settings, for tests that hold a second connection of their own."""

from django.db import connection


def database_dsn() -> dict:
    settings_dict = connection.settings_dict
    return {
        "host": settings_dict["HOST"],
        "port": settings_dict["PORT"] or 5432,
        "user": settings_dict["USER"],
        "dbname": settings_dict["NAME"],
        "password": settings_dict["PASSWORD"] or None,
    }
