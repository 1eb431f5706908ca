-- The team store on a shared database: run once, as a superuser (or a role with
-- CREATEROLE that may create schemas), connected to the store's database.

-- The tables' owner: nobody logs in as it; it is bound by the policies like everyone.
CREATE ROLE agent_owner NOLOGIN;
CREATE SCHEMA jupyter_agent AUTHORIZATION agent_owner;

-- The group of the users: every table the owner makes is theirs to read and write,
-- row-level security showing each member its own rows and what is shared with it.
CREATE ROLE agent_users NOLOGIN;
GRANT USAGE ON SCHEMA jupyter_agent TO agent_users;
ALTER DEFAULT PRIVILEGES FOR ROLE agent_owner IN SCHEMA jupyter_agent
    GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO agent_users;

-- One login role per user, in the group; its sessions are owned by its name.
CREATE ROLE alice LOGIN PASSWORD 'change me' IN ROLE agent_users;
