//! The operations of [`Memory`](crate::Memory), one file each: the request, its result and
//! its tests.

pub mod add;
pub mod delete;
pub mod engine;
pub mod get;
pub mod list;
pub mod search;
pub mod update;

/// Makes a request type awaitable by running its `send` method.
macro_rules! awaitable {
    ($request:ident, $output:ty) => {
        impl<'a> std::future::IntoFuture for $request<'a> {
            type Output = $crate::error::Result<$output>;
            type IntoFuture =
                std::pin::Pin<Box<dyn std::future::Future<Output = Self::Output> + Send + 'a>>;

            fn into_future(self) -> Self::IntoFuture {
                Box::pin(self.send())
            }
        }
    };
}

/// Adds the owner-id setters (`user`, `agent`, `app`, `run`) to a request with an `owners`
/// field.
macro_rules! owner_setters {
    () => {
        /// Restricts to (or assigns) this user id.
        pub fn user(mut self, id: impl Into<String>) -> Self {
            self.owners.user_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this agent id.
        pub fn agent(mut self, id: impl Into<String>) -> Self {
            self.owners.agent_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this app id.
        pub fn app(mut self, id: impl Into<String>) -> Self {
            self.owners.app_id = Some(id.into());
            self
        }

        /// Restricts to (or assigns) this run (session) id.
        pub fn run(mut self, id: impl Into<String>) -> Self {
            self.owners.run_id = Some(id.into());
            self
        }
    };
}

pub(crate) use awaitable;
pub(crate) use owner_setters;
