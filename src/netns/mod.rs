//! Viewer slots: network namespaces with their own IPv6 address, default route and shaped
//! link. Used by the `netns` fleet here and by Grid nodes on cloud hosts.
