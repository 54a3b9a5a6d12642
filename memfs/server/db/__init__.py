"""What every API's storage stands on, knowing none of them: one transaction (``Tx``), times as
stored, the schema and its migrations, object ids, whether the database answers, and the hub
that tells the change streams a store committed something."""
