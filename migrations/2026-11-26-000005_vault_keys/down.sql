DROP TABLE vault_keys;
