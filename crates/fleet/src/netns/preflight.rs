//! Checks, before anything is created, that slots can be made here: root (CAP_NET_ADMIN),
//! `ip` and `tc` from iproute2, and `bash` for the slot script. The environment is injected
//! so the check itself is unit-tested without changing users or PATH.

use super::NetnsError;
use std::path::{Path, PathBuf};

/// What the check needs to know about the host.
pub trait HostEnv {
    /// Effective user id.
    fn euid(&self) -> u32;
    /// Full path of a program, looked up in PATH and the sbin folders.
    fn find_program(&self, name: &str) -> Option<PathBuf>;
}

/// The real host.
pub struct SystemHostEnv;

impl HostEnv for SystemHostEnv {
    fn euid(&self) -> u32 {
        nix::unistd::geteuid().as_raw()
    }

    fn find_program(&self, name: &str) -> Option<PathBuf> {
        let path = std::env::var_os("PATH").unwrap_or_default();
        std::env::split_paths(&path)
            .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
            .map(|dir| dir.join(name))
            .find(|candidate| is_executable(candidate))
    }
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Tools found by `check_host`.
#[derive(Debug, Clone)]
pub struct HostTools {
    pub ip: PathBuf,
    pub tc: PathBuf,
    pub bash: PathBuf,
}

/// Fails with an error naming what is missing: root first, then each tool.
pub fn check_host(env: &dyn HostEnv) -> Result<HostTools, NetnsError> {
    if env.euid() != 0 {
        return Err(NetnsError::NotRoot);
    }
    let find = |tool: &'static str, package: &'static str| {
        env.find_program(tool)
            .ok_or(NetnsError::MissingTool { tool, package })
    };
    Ok(HostTools {
        ip: find("ip", "iproute2")?,
        tc: find("tc", "iproute2")?,
        bash: find("bash", "bash")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FakeEnv {
        euid: u32,
        programs: Vec<&'static str>,
    }

    impl HostEnv for FakeEnv {
        fn euid(&self) -> u32 {
            self.euid
        }
        fn find_program(&self, name: &str) -> Option<PathBuf> {
            self.programs
                .contains(&name)
                .then(|| PathBuf::from("/usr/sbin").join(name))
        }
    }

    #[test]
    fn not_root_says_root_is_needed() {
        let env = FakeEnv {
            euid: 1000,
            programs: vec!["ip", "tc", "bash"],
        };
        let message = check_host(&env).unwrap_err().to_string();
        assert!(message.contains("needs root"), "{message}");
        assert!(message.contains("sudo"), "{message}");
    }

    #[test]
    fn missing_ip_names_iproute2() {
        let env = FakeEnv {
            euid: 0,
            programs: vec!["tc", "bash"],
        };
        let message = check_host(&env).unwrap_err().to_string();
        assert!(message.contains("`ip`"), "{message}");
        assert!(message.contains("apt-get install iproute2"), "{message}");
    }

    #[test]
    fn missing_tc_is_named() {
        let env = FakeEnv {
            euid: 0,
            programs: vec!["ip", "bash"],
        };
        let message = check_host(&env).unwrap_err().to_string();
        assert!(message.contains("`tc`"), "{message}");
    }

    #[test]
    fn root_with_tools_passes() {
        let env = FakeEnv {
            euid: 0,
            programs: vec!["ip", "tc", "bash"],
        };
        let tools = check_host(&env).unwrap();
        assert_eq!(tools.ip, PathBuf::from("/usr/sbin/ip"));
    }

    #[test]
    fn real_host_check_matches_the_user() {
        let result = check_host(&SystemHostEnv);
        if nix::unistd::geteuid().is_root() {
            assert!(result.is_ok(), "{:?}", result.err());
        } else {
            assert!(matches!(result, Err(NetnsError::NotRoot)));
        }
    }
}
