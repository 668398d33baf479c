"""Alembic environment: run migrations on the connection `andreas.service.store` passes in."""

from alembic import context

from andreas.service.db import Base

target_metadata = Base.metadata
connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=target_metadata,
                  render_as_batch=True)  # SQLite alters tables by copying them
with context.begin_transaction():
    context.run_migrations()
