//! The gateway's read: every auth server of every organization, for its in-memory snapshot.

use diesel::prelude::*;
use domain::model::auth_server::AuthServer;
use domain::ports::storage::{AuthServerRepository, StoreError};
use uuid::Uuid;

use crate::PgStore;
use crate::error::map;
use crate::schema::auth_servers as s;

impl PgStore {
    /// Every auth server with its credentials, grouped by organization (each organization's
    /// servers read in one consistent snapshot). The gateway reloads this every second or so.
    pub async fn all_auth_servers(&self) -> Result<Vec<AuthServer>, StoreError> {
        let organizations: Vec<Uuid> = self
            .run_blocking(|conn| {
                s::table
                    .select(s::organization_id)
                    .distinct()
                    .load(conn)
                    .map_err(map)
            })
            .await?;
        let mut all = Vec::new();
        for organization in organizations {
            all.extend(self.list_auth_servers(organization, None).await?);
        }
        Ok(all)
    }
}
